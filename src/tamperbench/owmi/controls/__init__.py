"""OWMI's sensitivity anchors and positive controls: the known positive (a LoRA trained to report an
intervention, and its check through ``owmi run``), the linear probe anchor and SAE training."""
