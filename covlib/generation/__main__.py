"""`python -m covlib.generation`: convert the embedded model once and print where it is (used by `make env`)."""

import json

from covlib.generation.embedded import embedded_model_dir

if __name__ == "__main__":
    print(json.dumps({"embedded_model_dir": str(embedded_model_dir())}))
