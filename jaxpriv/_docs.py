"""Docstring sections written once and shared by parallel functions.

Parallel public functions (the Gaussian and Laplace noise's densities and moments, the RDP curves, the
shuffle bounds) take the same kind of arguments; their ``Args``/``Returns`` text is written once, as a
section, and :func:`fill_doc` puts it into each docstring at import, so ``help()`` and the doctests see
the whole text while the source says it once. A line of a docstring that is only ``{name}`` is replaced
by the section ``name``, indented as that line.
"""

from __future__ import annotations

import re
import textwrap

__all__ = ["fill_doc"]

_FIELD = re.compile(r"^(?P<indent>[ \t]*)\{(?P<name>\w+)\}[ \t]*$")


def fill_doc(**sections: str):
    """Decorator: every docstring line that is only ``{name}``, for a ``name`` in ``sections``, becomes that
    section (dedented, then indented as the line). A ``{name}`` with no section raises ``KeyError`` at import.

    Example:
      >>> from jaxpriv._docs import fill_doc
      >>> @fill_doc(args="Args:\\n  x: a number.")
      ... def f(x):
      ...     '''Identity.
      ...
      ...     {args}
      ...     '''
      ...     return x
      >>> print(f.__doc__.strip())
      Identity.
      <BLANKLINE>
          Args:
            x: a number.
    """

    def wrap(fn):
        lines = []
        for line in (fn.__doc__ or "").split("\n"):
            match = _FIELD.match(line)
            if match is None:
                lines.append(line)
                continue
            body = textwrap.dedent(sections[match["name"]]).strip("\n").split("\n")
            lines.extend(match["indent"] + part if part.strip() else "" for part in body)
        fn.__doc__ = "\n".join(lines)
        return fn

    return wrap
