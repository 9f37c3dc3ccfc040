"""The short prompts both real servers' tests send (tests/generation/test_endpoint.py, test_llama_server.py)."""

PROMPTS = [
    "The capital of France is",
    "Question: Who wrote Hamlet?\nAnswer:",
    "1, 2, 3, 4,",
    "Once upon a time",
    "The largest planet in the solar system is",
    "Water boils at",
    "Q: What colour is the sky?\nA:",
    "The Eiffel Tower is located in",
]
