"""OWMI analysis: sensitivity anchors (linear probe, known-positive LoRA), scoring tables, claim rules.

Reads the engine's ``owmi_runs`` records (``tamperbench.owmi.protocol.records``) and the estimators of
``tamperbench.stats``; writes nothing into an engine run except through ``owmi score``'s output
files. Heavy imports (torch, peft, sklearn) stay inside the functions that need them.
"""
