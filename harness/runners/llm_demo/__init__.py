"""Run MNN `llm_demo` on a device and turn what it printed into a result with a failure class.

    llm_demo CONFIG PROMPT_FILE [max_token_number]        (docs/llm-demo-output.md#arguments)

The runner writes the prompt file itself (one prompt per line, image tags), pushes it and
its images into a fresh run folder that is also the cwd (llm_demo writes `tmp*` there and
opens images relative to it), writes a derived config (greedy etc.) next to the export's
config, runs with LD_LIBRARY_PATH/ADSP_LIBRARY_PATH of the pushed runtime, and captures
stdout, stderr and the MNNJNI logcat slice of the run (Android builds with MNN_USE_LOGCAT
print every MNN_PRINT line, the summary block and the `[Error]` lines included, to logcat).

Splitting text per prompt: llm_demo prints nothing between prompts except the EOS newline
(`end_with`), and nothing at all when a prompt stops at the token limit. So:
  * one prompt per process (the default) is exact: the text is everything between
    `prompt file is ...` and the summary block, minus MNN log lines, minus the final EOS newline;
  * several prompts per process are split at newlines. That is right only when every answer
    is a single line that ended on EOS; when the count of pieces does not match the count of
    prompts the result says `split_exact=False` and keeps the whole text in `raw_text`.
    After the first INTERNAL_ERROR every later prompt of the same process is poisoned
    (`[Error]: LLM in error state. Status: 4`) and marked invalid.

CLI: `python -m harness.runners.llm_demo STDOUT_FILE [--stderr FILE] [--exit-code N]
[--logcat FILE] [--prompts N] [--max-tokens N]` prints one JSON object: class, texts, summary,
errors, ... Without --prompts the count is read from the prompt file the run names
(`prompt file is ...`); without --max-tokens the limit is the named config's max_new_tokens.
`stopped_on_eos` is true only for a prompt that ended before its token limit.
Strict JSON has no NaN/Infinity: non-finite summary values are written as null, and the text
llm_demo printed for them (`nan`, `-nan`, `inf`) is listed under `summary_nonfinite`.
"""

from harness.runners.llm_demo.cli import DEFAULT_MAX_NEW_TOKENS, main, prompt_count_of_run, token_limit_of_run
from harness.runners.llm_demo.output import ParsedOutput, PromptOutput, parse_output
from harness.runners.llm_demo.result import LOGCAT_TAG, LlmDemoResult, ProcessRun, analyse, combine_summaries, result_json
from harness.runners.llm_demo.runner import OUTPUT_FILES, PROMPT_FILE, LlmDemoRunner

__all__ = ["DEFAULT_MAX_NEW_TOKENS", "LOGCAT_TAG", "OUTPUT_FILES", "PROMPT_FILE", "LlmDemoResult", "LlmDemoRunner",
           "ParsedOutput", "ProcessRun", "PromptOutput", "analyse", "combine_summaries", "main", "parse_output",
           "prompt_count_of_run", "result_json", "token_limit_of_run"]
