"""Old path of `python -m harness.qnn.compiled_io`, kept so scripts that name it still run. It runs the
new module as `__main__` and defines no names: import from `harness.qnn.compiled_io`."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("harness.qnn.compiled_io", run_name="__main__", alter_sys=True)
