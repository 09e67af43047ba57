"""``python -m gridcoll``: the same as the ``gridcoll`` command."""

from gridcoll.cli.main import main

raise SystemExit(main())
