"""Every rule of the engine by its id: the cases decided before the table, the common constraints, each op's
rule and constraints, and the whole-model rules (what the generated compatibility page lists)."""

from __future__ import annotations

from edgekit.edgetpu.compatibility.cases import OP_CASES
from edgekit.edgetpu.compatibility.common import COMMON
from edgekit.edgetpu.compatibility.model_rules import MODEL_RULES
from edgekit.edgetpu.compatibility.rules import RULES


def all_rules() -> list[tuple[str, str, object]]:
    """Every rule of the engine as (id, where it applies, the rule): the cases decided before the table, the
    constraints of every op and of each op, the op types the table maps, and the whole-model rules. Ids are
    unique within where they apply (a constraint shared by several ops has one id)."""
    out: list[tuple[str, str, object]] = [(c.id, "any op", c) for c in OP_CASES]
    out += [(k.id, "every supported op", k) for k in COMMON]
    for name, rule in sorted(RULES.items()):
        out.append((f"{name}.mapped", name, rule))
        out += [(f"{name}.{k.id}", name, k) for k in rule.constraints]
    out += [(code, "the whole model", r) for code, r in MODEL_RULES.items()]
    return out
