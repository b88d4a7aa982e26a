"""Old path of `python -m harness.hostrt.executorch.etdump`, kept so scripts and runtime folders
made before the move still run. It runs the new module as `__main__` and defines no names."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("harness.hostrt.executorch.etdump", run_name="__main__", alter_sys=True)
