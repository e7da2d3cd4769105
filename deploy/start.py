"""The image's entrypoint (under tini): `python /app/deploy/start.py torchserve --start ...`.

A mounted --ts-config wins over the archives' batch settings (repackaged into a writable
store when they differ), then TorchServe runs with a drain on SIGTERM. The code lives in
`tsbatch.container`.
"""

import sys

from tsbatch.container.main import main

if __name__ == "__main__":
    sys.exit(main())
