"""Test harness: store backends for the contract suite, server fixtures, waiting helpers."""
