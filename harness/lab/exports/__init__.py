"""The night's export stage (docs/exports.md): a plan's `exports:` (spec.py, parse.py), the
export cache (cache.py), one export's process group (process.py), its build (build.py), its
failure's class (classify.py), its testcase (results.py), the stage (stage.py), the suites'
testcases of a failed export (gate.py) and `harness export` (cli.py). Import the modules
themselves: plan/load.py imports parse.py, so this package's top imports nothing."""
