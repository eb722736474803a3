package dev.hyspec.api;

import io.restassured.RestAssured;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * A bare HTTP/1.1 exchange over a socket, so a test controls exactly when the client reads and when
 * it hangs up (an HTTP client library may pool or drain connections).
 */
final class RawHttp implements AutoCloseable {
    private final Socket socket;
    private final BufferedReader in;
    final int status;

    /** Sends the request and reads the status line and headers. */
    RawHttp(String path, String json) {
        this(path, json, true);
    }

    /** Sends the request; reads the status and headers only when {@code awaitHeaders} (else {@code status} is 0). */
    RawHttp(String path, String json, boolean awaitHeaders) {
        try {
            socket = new Socket("localhost", RestAssured.port);
            byte[] body = json.getBytes(StandardCharsets.UTF_8);
            OutputStream out = socket.getOutputStream();
            out.write(("POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    + "Content-Length: " + body.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            out.write(body);
            out.flush();
            in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.UTF_8));
            if (!awaitHeaders) {
                status = 0;
                return;
            }
            String statusLine = in.readLine();
            status = Integer.parseInt(statusLine.split(" ")[1]);
            String line;
            while ((line = in.readLine()) != null && !line.isEmpty()) {
                // headers
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Reads until {@code n} SSE {@code data:} lines have arrived (chunk-size lines are skipped). */
    void readEvents(int n) {
        try {
            int seen = 0;
            String line;
            while (seen < n && (line = in.readLine()) != null) {
                if (line.startsWith("data: ")) {
                    seen++;
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Hangs up. */
    @Override
    public void close() {
        try {
            socket.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
