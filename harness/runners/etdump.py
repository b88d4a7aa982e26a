"""Old path of `python -m harness.runners.executorch.etdump`, kept so scripts that name it still run."""

if __name__ == "__main__":
    import sys

    from harness.runners.executorch.etdump import main

    sys.exit(main())
