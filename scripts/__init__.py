"""The programs beside the library; run each from the clone as python -m scripts.NAME."""
