"""``python -m pcm.extraction.prompts``: rewrite the committed catalogue after an ontology change."""

from pcm.extraction.prompts import refresh_catalogue

if __name__ == "__main__":
    print("catalogue refreshed" if refresh_catalogue() else "catalogue already up to date")
