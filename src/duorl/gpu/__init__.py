"""Shared GPU utilities: whole-cycle CUDA graphs and torch.compile switches."""
