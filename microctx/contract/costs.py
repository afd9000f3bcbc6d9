"""The cost and counter fields of a run: one list that the runner, the sweep, the ledger, the
frontier and the reports all read.

- `RUN_COSTS`: what the runner measures itself (the kernel's figures of the whole process tree).
- `COUNTER_KEYS`: the counters every manifest carries (null when the candidate did not report one:
  unknown, not zero).
- `MODEL_COUNTER_KEYS`: counters of model-backed candidates (llm), in a manifest only when reported.
- `MODEL_COUNTS`: the model calls and tokens the runner's proxy can count itself.
- `SWEEP_MODEL_COSTS`: the model counters that are also sweep.csv columns.
- `SWEEP_COSTS`: every cost a sweep's selection rule may minimise (sweep.csv columns).
- `COST_MEASURES`: the frontier's cost measures (per record) and what each one is.
"""

from __future__ import annotations

RUN_COSTS = ("wall_seconds", "cpu_seconds", "peak_memory_bytes")
COUNTER_KEYS = ("model_calls", "tool_calls", "input_tokens", "output_tokens")
MODEL_COUNTER_KEYS = (
    "cached_tokens",
    "cache_hits",
    "retries",
    "failed_calls",
    "failed_answers",
    "calls_without_usage",
    "cost_microdollars",
    "ttft_ms_median",
    "ttft_ms_max",
    "latency_ms_median",
    "retry_wait_ms",
    "model_records",
    "prompts",
    "truncated_records",
    "prompt_version",
)
MODEL_COUNTS = ("model_calls", "input_tokens", "output_tokens", "cached_tokens")
SWEEP_MODEL_COSTS = ("cached_tokens", "cost_microdollars")
SWEEP_COSTS = RUN_COSTS + COUNTER_KEYS + SWEEP_MODEL_COSTS
COST_MEASURES = {
    "dollars": "dollars per record (model dollars + CPU seconds at cpu_dollars_per_hour)",
    "model_dollars": "model dollars per record",
    "wall_seconds": "wall seconds per record",
    "cpu_seconds": "CPU seconds per record",
    "model_calls": "model calls per record",
    "tokens": "input + output tokens per record",
}
