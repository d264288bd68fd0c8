"""The three papers' own numbers, as they print them, for the results page's comparison tables.

Copied from the source texts in ``/work/shared/seeds/`` (named in each ``cite``); nothing here is measured
by tamperbench. Each number is the paper's, on the paper's models: the page sets them beside ours to compare
the instruments, not the models (ours are 135M and 270M parameters; theirs 2B to 72B, or closed models).
"""

from __future__ import annotations

INSTRUMENTS = ("**This compares instruments, not models.** The papers' rows are their models (2B to 72B parameters, "
               "or closed models) under their protocols; ours are the two installable models (SmolLM2-135M-Instruct "
               "and Gemma 3 270M) through tamperbench on a CPU. A row pair says whether tamperbench measures what the "
               "paper measures the way the paper does, not how the models compare.")

# Sleight of Word (Cetoli), Table 1: 19 models x 10,100 trials; judge labels (%) by a jury of three 26B-70B
# judges (Gemma-4-26B, Qwen3.6-27B, Llama-3.3-70B), and the post-swap rise in surprisal / entropy (nats).
SLEIGHT_CITE = ("Sleight of Word (Cetoli), Table 1 \"Main sweep results\": 19 models x 10,100 trials (100 prompts x "
                "101 substitutions), greedy, 256-token budget; judge labels by a jury of Gemma-4-26B, Qwen3.6-27B and "
                "Llama-3.3-70B")
SLEIGHT_COLUMNS = ("Flag.", "Flag. (M.E.)", "Ign.", "Derail.", "Corr.", "Switch aware", "Δ surp. (nats)",
                   "Δ ent. (nats)")
SLEIGHT_TABLE1 = [  # model, Flag., Flag. (M.E.), Ign., Derail., Corr., Switch aware, Δ surp., Δ ent.
    ("Qwen2.5-14B", "46", "78", "0", "76", "48", "1.3", "+0.18", "+0.38"),
    ("DeepSeek-R1-Distill-7B", "46", "54", "0", "83", "37", "0.0", "+0.18", "+0.36"),
    ("Qwen2.5-72B (AWQ)", "45", "10", "0", "83", "38", "0.1", "+0.16", "+0.31"),
    ("DeepSeek-R1-Distill-32B", "42", "50", "0", "84", "31", "0.0", "+0.19", "+0.39"),
    ("Qwen2.5-32B (AWQ)", "33", "25", "0", "75", "43", "0.2", "+0.16", "+0.35"),
    ("Llama 3.3 70B (AWQ)", "14", "38", "0", "82", "32", "0.0", "+0.38", "+0.74"),
    ("Gemma 3 27B", "13", "29", "0", "74", "42", "0.1", "+0.14", "+0.31"),
    ("gpt-oss-20B", "13", "47", "0", "97", "12", "0.0", "+0.54", "+0.92"),
    ("Qwen3 32B (AWQ)", "11", "6", "0", "64", "44", "0.0", "+0.19", "+0.38"),
    ("Gemma 4 31B", "9", "3", "0", "66", "47", "0.0", "+0.10", "+0.23"),
    ("Yi-1.5-34B", "6", "2", "0", "73", "38", "0.0", "+0.26", "+0.50"),
    ("Qwen3.6 27B", "5", "22", "0", "85", "17", "0.1", "+0.23", "+0.56"),
    ("Magistral-Small-24B", "5", "3", "0", "84", "26", "0.0", "+0.28", "+0.53"),
    ("Gemma 4 E4B", "4", "5", "1", "76", "32", "0.0", "+0.29", "+0.59"),
    ("Mistral-Small-24B", "3", "0", "0", "82", "28", "0.0", "+0.40", "+0.70"),
    ("Gemma 4 12B", "2", "24", "0", "77", "38", "0.0", "+0.15", "+0.36"),
    ("Gemma 4 E2B", "2", "4", "0", "82", "27", "0.0", "+0.13", "+0.31"),
    ("Gemma 4 26B-A4B", "1", "2", "0", "79", "36", "0.0", "+0.06", "+0.16"),
    ("Phi-4 (14B)", "1", "3", "0", "62", "48", "0.0", "+0.30", "+0.56"),
]

# Exact Words: 13 models x 74 prompts = 962 scored quotes, provider-default sampling, one run.
QUOTE_CITE = ("Exact Words (\"I planted typos to catch AI models editing quotes\"): 13 models x 74 prompts = 962 "
              "quotes at provider-default sampling, one run; Findings 1-4")
QUOTE_MODELS = [  # model, faithful rate (%) over both arms, as the text gives it
    ("Gemma 4 31B", "100"), ("Gemma 4 26B-A4B", "100"), ("Gemini 3.7 Flash", "100"), ("GPT-6-sol", "100"),
    ("GLM-5", "100"), ("Claude Haiku 5.5", "94.6"), ("Claude Sonnet 5.5", "93.2"), ("DeepSeek-R1", "91.9"),
    ("GPT-OSS-20B", "89.2"), ("GPT-OSS-120B", "82.4"),
]
QUOTE_ARMS = {"plain": "95.0", "strict": "94.4"}  # faithful rate (%) per arm, all 13 models
QUOTE_POOLED = {"n": "962", "faithful": "911", "corrected": "0", "truncated": "26", "wrong_span": "13",
                "rewritten": "12"}  # Finding 2's taxonomy over all 962 quotes

# OWMI (Ferrara): the pooled dose battery and the known positive.
OWMI_CITE = ("Open-Weight Masked Introspection (Ferrara), Sections 1, 3.5 and 7.3: pooled over the 11,216 complete "
             "pairs of the dose battery (Qwen2.5-7B-Instruct, Mistral-7B-Instruct-v0.3); the known positive is a "
             "LoRA fine-tune of Qwen2.5-7B-Instruct on held-out directions")
OWMI_POOLED = {"pairs": "11,216", "dprime": "0.0039 [0.0017, 0.0062]", "auroc": "0.5007",
               "equivalence": "below 0.15 pp of AUROC at p < 0.0001; below 0.125 pp at p < 0.01; below 0.11 pp "
                              "at p < 0.05"}
OWMI_KNOWN_POSITIVE = {"pairs": "100", "hits": "100/100", "false_alarms": "0/100 (all 100 sham trials identified)",
                       "dprime": "5.15", "auroc": "1.0"}
