"""``python -m jaxpriv``: the same command as ``jaxpriv`` (see :mod:`jaxpriv.cli`)."""

from .cli import main

raise SystemExit(main())
