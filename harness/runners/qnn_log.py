"""Old path of `python -m harness.qnn.log`, kept so scripts that name it still run. It runs the
new module as `__main__` and defines no names: import from `harness.qnn`."""

if __name__ == "__main__":
    import runpy

    runpy.run_module("harness.qnn.log", run_name="__main__", alter_sys=True)
