// ByteSize as it was before issue 28: defined by the fsdp passes.
int64_t parseByteSize(const char *text);
