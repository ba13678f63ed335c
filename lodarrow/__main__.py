"""``python -m lodarrow`` (also the ``lodarrow`` console script): ``demo``, ``bench``, ``info``."""

import sys


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    from lodarrow._cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
