package org.apache.kafka.common.network;
/** Harness shim: only named by an unused Utils method. */
public interface TransferableChannel extends java.nio.channels.GatheringByteChannel {
    boolean hasPendingWrites();
    long transferFrom(java.nio.channels.FileChannel fileChannel, long position, long count) throws java.io.IOException;
}
