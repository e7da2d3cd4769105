"""A serving candidate: one way a worker may serve a model, named one way everywhere.

The same idea has four spellings: the build's target (``cpu-bf16``), the package file
(``model.cpu-bf16.pt2``), the candidate name that keys the build's records
(``aoti-cpu-bf16``) and the benchmarks' label (``aoti bf16``). This type produces and
parses all of them, so no other module builds or splits those strings and they cannot
drift apart. TorchScript has one file for every precision and is recorded on the CPU, so
its name carries no device.
"""

from __future__ import annotations

from dataclasses import dataclass

RUNTIMES = ("torchscript", "aoti")
DEVICES = ("cpu", "cuda")
PRECISIONS = ("fp32", "bf16", "fp16", "int8")
# The archive's TorchScript model, whatever the precision it is run at.
TORCHSCRIPT_FILE = "model.pt"
PACKAGE_SUFFIX = ".pt2"


@dataclass(frozen=True)
class ServingCandidate:
    """A runtime on a device at a precision (``aoti`` runs a compiled package)."""

    runtime: str
    device: str
    precision: str

    def __post_init__(self) -> None:
        for value, allowed in (
            (self.runtime, RUNTIMES),
            (self.device, DEVICES),
            (self.precision, PRECISIONS),
        ):
            if value not in allowed:
                raise ValueError(f"{value!r} is not one of {allowed}")
        if self.runtime == "torchscript" and self.precision == "int8":
            raise ValueError("int8 exists only as a compiled package (aoti), never as TorchScript")

    @property
    def target(self) -> str:
        """The build's compile target: ``cpu-bf16``."""
        return f"{self.device}-{self.precision}"

    @property
    def name(self) -> str:
        """The key of the build's records: ``aoti-cpu-bf16``, ``torchscript-fp32``."""
        return f"aoti-{self.target}" if self.runtime == "aoti" else f"torchscript-{self.precision}"

    @property
    def file_name(self) -> str:
        """The file in the archive: ``model.cpu-bf16.pt2``, or the TorchScript model."""
        return f"model.{self.target}{PACKAGE_SUFFIX}" if self.runtime == "aoti" else TORCHSCRIPT_FILE

    @property
    def label(self) -> str:
        """How reports and benchmark rows show it: ``aoti bf16``."""
        return f"{self.runtime} {self.precision}"

    def on(self, device: str) -> ServingCandidate:
        """The same candidate on another device (TorchScript runs anywhere)."""
        return ServingCandidate(self.runtime, device, self.precision)

    @classmethod
    def parse(cls, text: str, device: str = "cpu") -> ServingCandidate:
        """A candidate from its name, target or package file name; a TorchScript name
        carries no device, so it is put on ``device``."""
        if text.startswith("model.") and text.endswith(PACKAGE_SUFFIX):
            text = text[len("model.") : -len(PACKAGE_SUFFIX)]
        parts = text.split("-")
        if len(parts) == 2 and parts[0] == "torchscript":
            return cls("torchscript", device, parts[1])
        if len(parts) == 3 and parts[0] == "aoti":
            return cls("aoti", parts[1], parts[2])
        if len(parts) == 2:
            return cls("aoti", parts[0], parts[1])
        raise ValueError(
            f"{text!r} is not a serving candidate (like aoti-cpu-bf16, torchscript-fp32, cpu-bf16)"
        )


BASELINE = ServingCandidate("torchscript", "cpu", "fp32")
