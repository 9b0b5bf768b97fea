"""The batch executor: provider batch APIs (OpenAI-compatible files + batches, Anthropic message batches)."""
