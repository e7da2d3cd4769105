"""TorchScript's table of builtin operators after a library replaces one: the failure seen in
the suite, reproduced on purpose, and the toolkit's script, which puts the table right
first. Each case runs in a fresh interpreter, so that its own allocations decide what lands
at a freed address."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPLACED_THEN_REUSED = """
import torch
from tsbatch.archive.scripting import replaced_operator_ids, script

class Padded(torch.nn.Module):
    def __init__(self, padding):
        super().__init__()
        self.padding = padding  # a 4-tuple, as a Conv2d's padding is

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.pad(x, self.padding)

library = torch.library.Library("tsbatch_table_test", "DEF")
kept = []

def tuple_at_a_freed_operators_address(name):
    library.define(f"{name}(Tensor x) -> Tensor")
    freed = id(getattr(torch.ops.tsbatch_table_test, name)._op)
    library.define(f"{name}.other(Tensor x, int y) -> Tensor")  # replaces the packet's function
    print("replaced", replaced_operator_ids() == [freed])
    for count in range(100_000):
        kept.append(tuple([count] * 4))
        if id(kept[-1]) == freed:
            return kept[-1]
    raise SystemExit("no tuple landed at the freed address")

padded = Padded(tuple_at_a_freed_operators_address("f"))
try:
    torch.jit.script(padded)
    print("torch.jit.script worked")
except RuntimeError as error:
    print("torch.jit.script failed:", str(error).strip().splitlines()[0])
script(padded)
print("ours worked")
print("still known", torch.jit._builtins._find_builtin(torch.ops.tsbatch_table_test.f._op))
"""

INDUCTOR_IMPORT = """
import torch
from tsbatch.archive.scripting import forget_replaced_operators, replaced_operator_ids

torch.jit._builtins._get_builtin_table()
print("fresh", len(replaced_operator_ids()))
import torch._inductor.compile_fx
replaced = replaced_operator_ids()
print("after inductor", sorted({torch.jit._builtins._builtin_table[key] for key in replaced}))
print("forgot all", forget_replaced_operators() == len(replaced))
print("left", len(replaced_operator_ids()))
"""


def run(script: str, folder: Path) -> list[str]:
    """``script`` from a file (TorchScript reads a module's source)."""
    path = folder / "script.py"
    path.write_text(script)
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


def test_a_freed_operators_address_reused_by_a_tuple_fails_torch_jit_script_but_not_ours(
    tmp_path: Path,
) -> None:
    assert run(REPLACED_THEN_REUSED, tmp_path) == [
        "replaced True",
        "torch.jit.script failed: builtin cannot be used as a value:",
        "ours worked",
        "still known tsbatch_table_test::f",
    ]


def test_inductors_import_replaces_quantized_operators_and_forgetting_leaves_none(tmp_path: Path) -> None:
    lines = run(INDUCTOR_IMPORT, tmp_path)
    assert lines[0] == "fresh 0"
    assert lines[1].startswith("after inductor ['quantized_decomposed::"), lines[1]
    assert lines[2:] == ["forgot all True", "left 0"]
