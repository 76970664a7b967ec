package dev.onceflow.bench;

import java.io.IOException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * What every peer of bench/kafka reports: one JSON line on stdout when it processed the expected
 * records, then it waits for stdin to close (the driver reads the process's CPU time first).
 */
public final class PeerReport {
  public static final AtomicLong records = new AtomicLong();
  public static volatile long firstAt = 0;
  public static volatile long lastAt = 0;

  private PeerReport() {}

  /** Counts one processed record. */
  public static void processed() {
    long now = System.currentTimeMillis();
    if (firstAt == 0) firstAt = now;
    lastAt = now;
    records.incrementAndGet();
  }

  public static void done() {
    System.out.println(
        "{\"event\":\"done\",\"records\":" + records.get() + ",\"firstAt\":" + firstAt + ",\"lastAt\":" + lastAt + "}");
    System.out.flush();
  }

  public static void awaitStdinClose() throws IOException {
    while (System.in.read() != -1) {
      // The driver closes stdin when it has read this process's CPU time.
    }
  }
}
