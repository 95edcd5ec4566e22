"""What the benchmarks, deploy and the tests share, so that bench/ and deploy/ need not import each other."""
