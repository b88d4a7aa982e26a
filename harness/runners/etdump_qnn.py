"""Old path of `python -m harness.runners.executorch.qnn_profile`, kept so scripts that name it still
run. It runs the new module as `__main__` and defines no names: import from `harness.runners.executorch`."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("harness.runners.executorch.qnn_profile", run_name="__main__", alter_sys=True)
