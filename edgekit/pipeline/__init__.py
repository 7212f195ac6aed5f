"""The steps put together: ``build`` (quantize, compile, evaluate, bundle) and the API's quantize options."""
