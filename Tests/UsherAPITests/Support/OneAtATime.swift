import Testing

/// Suites that run alone: `make test` runs them in a pass of their own after
/// the parallel one, one test at a time. They block their thread for seconds
/// (scripts, killed clients, sleeps), time Redis round trips or deadlines to
/// the second, or read a Redis resource right after deleting it; beside the
/// parallel tests they would hold both cooperative threads of a 2-core machine
/// or miss their deadlines.
@Suite(.serialized) enum OneAtATime {}
