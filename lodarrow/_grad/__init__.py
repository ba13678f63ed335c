"""Gradients of the sequence operators (docs/gradients.md).

``_rules.RULES`` holds, per differentiable operator, a forward that keeps residuals and a
backward from them; ``_backward`` the array-level backward of every operator; ``_vjp`` the
public :func:`lodarrow.vjp`.  This layer sits above the operators (``_ops``) and the backends
and below the table layer; nothing below imports it.
"""

from lodarrow._grad._rules import NOT_DIFFERENTIABLE, RESIDUALS, RULES, Rule
from lodarrow._grad._vjp import vjp

__all__ = ["NOT_DIFFERENTIABLE", "RESIDUALS", "RULES", "Rule", "vjp"]
