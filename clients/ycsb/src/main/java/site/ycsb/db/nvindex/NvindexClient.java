package site.ycsb.db.nvindex;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.TimeUnit;
import net.spy.memcached.AddrUtil;
import net.spy.memcached.CASResponse;
import net.spy.memcached.CASValue;
import net.spy.memcached.ConnectionFactoryBuilder;
import net.spy.memcached.MemcachedClient;
import net.spy.memcached.transcoders.Transcoder;
import net.spy.memcached.CachedData;
import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * A YCSB {@link DB} (YCSB core 0.17.0) over a memcached-protocol server, for
 * {@code nvindex serve}: reads, inserts, updates and deletes through
 * spymemcached 2.12.3 (ASCII protocol), scans through the server's
 * {@code rget} range read (docs/kv.md, "Range reads"; MemcacheDB's form) on a
 * plain socket, since no stock memcached client sends it.
 *
 * <p>A record is one item under its YCSB key (the table name is not part of
 * the key: one table per server). Its value is the record's fields back to
 * back, each as a 4-byte big-endian name length, the name's UTF-8 bytes, a
 * 4-byte big-endian value length and the value's bytes (YCSB's default: 10
 * fields of 100 bytes, about 1,080 bytes per item; the server's default
 * --max-item-size is 1 MiB). insert is memcached's {@code add} (an existing
 * key is an error, as YCSB expects of an insert); update reads the record
 * with {@code gets}, replaces the updated fields and writes it back with
 * {@code cas}, again on a conflict, so the fields it does not update are
 * kept (YCSB's upstream memcached binding replaces the whole record with the
 * updated fields alone); delete is {@code delete}.
 *
 * <p>Properties: {@code nvindex.hosts} (HOST:PORT, default 127.0.0.1:11211;
 * one server: scans need the whole key range in one place), {@code
 * nvindex.timeout.ms} (each request's wait, default 10,000 ms). Each YCSB
 * client thread has its own instance: one spymemcached connection and one
 * scan socket.
 */
public final class NvindexClient extends DB {
  private MemcachedClient client;
  private String host;
  private int port;
  private long timeoutMs;
  private Socket scanSocket;
  private java.io.BufferedInputStream scanIn;

  /** Keeps a record's bytes as they are (flags 0), not Java-serialized. */
  private static final class RawTranscoder implements Transcoder<byte[]> {
    @Override
    public boolean asyncDecode(CachedData d) {
      return false;
    }

    @Override
    public CachedData encode(byte[] o) {
      return new CachedData(0, o, getMaxSize());
    }

    @Override
    public byte[] decode(CachedData d) {
      return d.getData();
    }

    @Override
    public int getMaxSize() {
      return 1 << 20;
    }
  }

  private static final RawTranscoder RAW = new RawTranscoder();
  /** Errors printed on stderr per instance, at most (the rest are counted by YCSB). */
  private static final int ERRORS_SHOWN = 5;
  private int errorsShown;

  /** `e` on stderr (the first ERRORS_SHOWN of this instance); returns Status.ERROR. */
  private Status error(String op, String key, Exception e) {
    if (errorsShown++ < ERRORS_SHOWN) {
      System.err.println("NvindexClient: " + op + " " + key + ": " + e);
    }
    return Status.ERROR;
  }
  /** The end of every scan's range: above every YCSB key ("user..."). */
  private static final String SCAN_END = "~";

  @Override
  public void init() throws DBException {
    String hosts = getProperties().getProperty("nvindex.hosts", "127.0.0.1:11211");
    timeoutMs = Long.parseLong(getProperties().getProperty("nvindex.timeout.ms", "10000"));
    int colon = hosts.lastIndexOf(':');
    if (colon <= 0 || hosts.contains(",") || hosts.contains(" ")) {
      throw new DBException("nvindex.hosts: give one HOST:PORT, got '" + hosts + "'");
    }
    host = hosts.substring(0, colon);
    port = Integer.parseInt(hosts.substring(colon + 1));
    try {
      client = new MemcachedClient(
          new ConnectionFactoryBuilder()
              .setProtocol(ConnectionFactoryBuilder.Protocol.TEXT)
              .setOpTimeout(timeoutMs)
              // Retry: an operation issued while the connection is still being made
              // waits for it (Cancel would fail it: a lost insert ends a YCSB load thread)
              .setFailureMode(net.spy.memcached.FailureMode.Retry)
              .build(),
          AddrUtil.getAddresses(hosts));
    } catch (IOException e) {
      throw new DBException("cannot connect to " + hosts + ": " + e.getMessage(), e);
    }
  }

  @Override
  public void cleanup() throws DBException {
    if (client != null) {
      client.shutdown(timeoutMs, TimeUnit.MILLISECONDS);
    }
    try {
      if (scanSocket != null) {
        scanSocket.close();
      }
    } catch (IOException e) {
      throw new DBException(e);
    }
  }

  /** A record's value bytes (see the class comment). */
  static byte[] encode(Map<String, ByteIterator> values) {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
      byte[] name = e.getKey().getBytes(StandardCharsets.UTF_8);
      byte[] value = e.getValue().toArray();
      out.writeBytes(ByteBuffer.allocate(4).putInt(name.length).array());
      out.writeBytes(name);
      out.writeBytes(ByteBuffer.allocate(4).putInt(value.length).array());
      out.writeBytes(value);
    }
    return out.toByteArray();
  }

  /** Decodes `data` into `into`, only `fields` (all when null); false when malformed. */
  static boolean decode(byte[] data, Set<String> fields, Map<String, ByteIterator> into) {
    ByteBuffer b = ByteBuffer.wrap(data);
    while (b.hasRemaining()) {
      if (b.remaining() < 4) {
        return false;
      }
      int n = b.getInt();
      if (n < 0 || b.remaining() < n + 4) {
        return false;
      }
      String name = new String(data, b.position(), n, StandardCharsets.UTF_8);
      b.position(b.position() + n);
      int v = b.getInt();
      if (v < 0 || b.remaining() < v) {
        return false;
      }
      if (fields == null || fields.contains(name)) {
        into.put(name, new ByteArrayByteIterator(data, b.position(), v));
      }
      b.position(b.position() + v);
    }
    return true;
  }

  @Override
  public Status read(String table, String key, Set<String> fields, Map<String, ByteIterator> result) {
    try {
      byte[] v = client.get(key, RAW);
      if (v == null) {
        return Status.NOT_FOUND;
      }
      return decode(v, fields, result) ? Status.OK : Status.UNEXPECTED_STATE;
    } catch (RuntimeException e) {
      return error("read", key, e);
    }
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      return client.add(key, 0, encode(values), RAW).get(timeoutMs, TimeUnit.MILLISECONDS)
          ? Status.OK
          : Status.ERROR;
    } catch (Exception e) {
      return error("insert", key, e);
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    try {
      // The new values' bytes, once: a ByteIterator is used up when read,
      // and a retry after EXISTS must write the same bytes again.
      Map<String, byte[]> updated = new HashMap<>();
      for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
        updated.put(e.getKey(), e.getValue().toArray());
      }
      for (int attempt = 0; attempt < 100; ++attempt) {
        CASValue<byte[]> cur = client.gets(key, RAW);
        if (cur == null) {
          return Status.NOT_FOUND;
        }
        Map<String, ByteIterator> record = new HashMap<>();
        if (!decode(cur.getValue(), null, record)) {
          return Status.UNEXPECTED_STATE;
        }
        for (Map.Entry<String, byte[]> e : updated.entrySet()) {
          record.put(e.getKey(), new ByteArrayByteIterator(e.getValue()));
        }
        CASResponse r = client.cas(key, cur.getCas(), encode(record), RAW);
        if (r == CASResponse.OK) {
          return Status.OK;
        }
        if (r == CASResponse.NOT_FOUND) {
          return Status.NOT_FOUND;
        }
        // EXISTS: another client wrote the record in between: again.
      }
      return Status.ERROR;
    } catch (RuntimeException e) {
      return error("update", key, e);
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      return client.delete(key).get(timeoutMs, TimeUnit.MILLISECONDS) ? Status.OK : Status.NOT_FOUND;
    } catch (Exception e) {
      return error("delete", key, e);
    }
  }

  /**
   * {@code rget <startkey> ~ 0 0 <recordcount>}: up to recordcount records
   * with keys from startkey on, in key order, each parsed from its
   * {@code VALUE <key> <flags> <bytes>} line and data block up to {@code END}.
   */
  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
      Vector<HashMap<String, ByteIterator>> result) {
    try {
      if (scanSocket == null) {
        scanSocket = new Socket();
        scanSocket.connect(new InetSocketAddress(host, port), (int) timeoutMs);
        scanSocket.setSoTimeout((int) timeoutMs);
        scanSocket.setTcpNoDelay(true);
        scanIn = new java.io.BufferedInputStream(scanSocket.getInputStream(), 1 << 16);
      }
      OutputStream out = scanSocket.getOutputStream();
      out.write(("rget " + startkey + " " + SCAN_END + " 0 0 " + Math.max(1, recordcount) + "\r\n")
          .getBytes(StandardCharsets.US_ASCII));
      out.flush();
      InputStream in = scanIn;
      while (true) {
        String line = readLine(in);
        if (line.equals("END")) {
          return Status.OK;
        }
        String[] f = line.split(" ");
        if (f.length != 4 || !f[0].equals("VALUE")) {
          closeScanSocket();
          return Status.ERROR;  // SERVER_ERROR, CLIENT_ERROR: the reply says why
        }
        byte[] data = in.readNBytes(Integer.parseInt(f[3]) + 2);
        HashMap<String, ByteIterator> record = new HashMap<>();
        if (data.length != Integer.parseInt(f[3]) + 2
            || !decode(java.util.Arrays.copyOf(data, data.length - 2), fields, record)) {
          closeScanSocket();
          return Status.UNEXPECTED_STATE;
        }
        result.add(record);
      }
    } catch (IOException | RuntimeException e) {
      closeScanSocket();
      return error("scan", startkey, e);
    }
  }

  private void closeScanSocket() {
    try {
      if (scanSocket != null) {
        scanSocket.close();
      }
    } catch (IOException ignored) {
      // closing a broken socket: nothing more to do
    }
    scanSocket = null;
    scanIn = null;
  }

  /** One reply line without its CRLF; IOException at the end of the stream. */
  private static String readLine(InputStream in) throws IOException {
    ByteArrayOutputStream line = new ByteArrayOutputStream();
    int c;
    while ((c = in.read()) != -1) {
      if (c == '\n') {
        byte[] b = line.toByteArray();
        int n = b.length > 0 && b[b.length - 1] == '\r' ? b.length - 1 : b.length;
        return new String(b, 0, n, StandardCharsets.US_ASCII);
      }
      line.write(c);
    }
    throw new IOException("the server closed the connection");
  }
}
