package org.apache.kafka.common.record;
import java.nio.ByteBuffer;
/** Harness shim: never instantiated by the assignors. */
public class MemoryRecords extends BaseRecords {
    private final ByteBuffer buffer;
    private MemoryRecords(ByteBuffer buffer) { this.buffer = buffer; }
    public static MemoryRecords readableRecords(ByteBuffer buffer) { return new MemoryRecords(buffer); }
    public ByteBuffer buffer() { return buffer.duplicate(); }
    @Override public int sizeInBytes() { return buffer.limit(); }
}
