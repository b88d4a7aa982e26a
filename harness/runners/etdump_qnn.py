"""Old path of `python -m harness.runners.executorch.etdump_qnn`, kept so scripts that name it still run."""

if __name__ == "__main__":
    import sys

    from harness.runners.executorch.etdump_qnn import main

    sys.exit(main())
