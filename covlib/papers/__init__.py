"""One package per paper; no paper imports another (what two share lives in a package named for its noun)."""
