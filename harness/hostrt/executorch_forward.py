"""Old path of `python -m harness.hostrt.executorch.forward`, kept so scripts that name it still run."""

if __name__ == "__main__":
    import sys

    from harness.hostrt.executorch.forward import main

    sys.exit(main())
