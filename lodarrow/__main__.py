"""Placeholder: the command line (``python -m lodarrow demo|bench|info``) is being built."""


def main(argv=None):
    raise NotImplementedError


if __name__ == "__main__":
    main()
