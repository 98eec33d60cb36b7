"""The tests, laid out like ``src/pcm``: a module's tests sit in the folder of its package."""
