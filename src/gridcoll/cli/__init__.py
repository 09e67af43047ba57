"""The ``gridcoll`` command: one module per subcommand, wired in :mod:`gridcoll.cli.main`."""

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the ``gridcoll`` command line (see :func:`gridcoll.cli.main.main`)."""
    from gridcoll.cli.main import main as _main

    return _main(argv)
