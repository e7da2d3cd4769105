"""Every ``torch.jit.script`` the toolkit makes, after putting right TorchScript's table of
builtin operators.

TorchScript knows an operator by the ``id()`` of its Python function object
(``torch.jit._builtins._builtin_table``). When a library defines a new overload of an
operator whose packet already exists, the packet gets a new function object. The old one is
freed, but its id stays in the table. torch.ao's ``quantized_decomposed`` operators do this
when they are imported, and Inductor, torchao and transformers all import them.

Later, another object can be allocated at the freed address, such as a Conv2d's padding
tuple. If that object is an attribute of the module, ``torch.jit.script`` fails with
"builtin cannot be used as a value" (torch 2.14.1; tracing the same module did not fail).
This failed the suite once, in a process that had compiled a package earlier. The image
build would fall back to tracing, naming only the exception's type. :func:`script` drops
such entries first.
"""

from __future__ import annotations

import torch
import torch.jit._builtins as jit_builtins

# torch also registers plain Python functions under these namespaces, with no packet behind
# them, so their entries are left alone. Every other entry comes from a packet.
NAMESPACES_WITHOUT_PACKETS = frozenset({"aten", "prim"})


def replaced_operator_ids() -> list[int]:
    """Table keys whose operator's packet is gone or now holds another function object."""
    table = jit_builtins._builtin_table or {}
    namespaces = vars(torch.ops)
    replaced = []
    for key, qualified_name in table.items():
        namespace_name, _, name = qualified_name.partition("::")
        if namespace_name in NAMESPACES_WITHOUT_PACKETS:
            continue
        namespace = namespaces.get(namespace_name)
        packet = vars(namespace).get(name) if namespace is not None else None
        if packet is None or id(packet._op) != key:
            replaced.append(key)
    return replaced


def forget_replaced_operators() -> int:
    """Drop the entries :func:`replaced_operator_ids` finds; returns how many were dropped."""
    replaced = replaced_operator_ids()
    table = jit_builtins._builtin_table or {}
    for key in replaced:
        del table[key]
    return len(replaced)


def script(module: torch.nn.Module) -> torch.jit.ScriptModule:
    """``torch.jit.script`` on a sound table."""
    forget_replaced_operators()
    return torch.jit.script(module)
