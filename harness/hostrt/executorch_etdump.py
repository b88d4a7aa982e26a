"""Old path of `python -m harness.hostrt.executorch.etdump`, kept so scripts that name it still run."""

if __name__ == "__main__":
    import sys

    from harness.hostrt.executorch.etdump import main

    sys.exit(main())
