package dev.tsbatch.oip;

import io.netty.handler.codec.http.FullHttpRequest;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Field;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.pytorch.serve.servingsdk.http.Request;
import org.pytorch.serve.servingsdk.http.Response;
import org.pytorch.serve.servingsdk.impl.ModelServerRequest;
import org.pytorch.serve.util.ConfigManager;
import org.pytorch.serve.util.Connector;
import org.pytorch.serve.util.ConnectorType;

/**
 * Passes POST /v2/models/{m}[/versions/{v}]/infer (and /explain) on to TorchServe's own
 * /predictions/{m}[/{v}] (and /explanations) on the inference address, headers and body
 * unchanged, and the answer back unchanged: the frontend's token check, queue, batching,
 * size limits and metrics all apply, and the handler reads the body as it always does.
 *
 * <p>The plugin SDK's Request lists header names but not their values, so the values are
 * read from the Netty request it wraps. Endpoint plugins run on TorchServe's task pool, not
 * on a Netty event loop, so waiting for the answer here blocks no connection.
 */
final class InferForwarder {
    /** Headers the JDK client sets itself (or refuses), and hop-by-hop ones. */
    private static final Set<String> NOT_FORWARDED =
            Set.of("host", "content-length", "connection", "expect", "upgrade", "transfer-encoding", "keep-alive");

    private final HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    void forward(Request request, Response response, ModelPath model) throws IOException {
        String kind = model.action.equals("infer") ? "predictions" : "explanations";
        String path = "/" + kind + "/" + encode(model.name) + (model.version == null ? "" : "/" + encode(model.version));
        String query = request.getRequestURI().contains("?") ? "?" + request.getRequestURI().split("\\?", 2)[1] : "";
        HttpRequest.Builder forwarded = HttpRequest.newBuilder(URI.create(inferenceBase() + path + query));
        for (Map.Entry<String, String> header : nettyRequest(request).headers()) {
            if (!NOT_FORWARDED.contains(header.getKey().toLowerCase())) {
                forwarded.header(header.getKey(), header.getValue());
            }
        }
        byte[] body;
        try (InputStream in = request.getInputStream()) {
            body = in.readAllBytes();
        }
        HttpResponse<byte[]> answer;
        try {
            answer = client.send(forwarded.POST(HttpRequest.BodyPublishers.ofByteArray(body)).build(),
                    HttpResponse.BodyHandlers.ofByteArray());
        } catch (InterruptedException exc) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while forwarding to " + path, exc);
        }
        response.setStatus(answer.statusCode());
        for (Map.Entry<String, List<String>> header : answer.headers().map().entrySet()) {
            if (!NOT_FORWARDED.contains(header.getKey().toLowerCase()) && !header.getKey().startsWith(":")) {
                for (String value : header.getValue()) {
                    response.addHeader(header.getKey(), value);
                }
            }
        }
        try (OutputStream out = response.getOutputStream()) {
            out.write(answer.body());
        }
    }

    /** Where this server's inference API listens, as a client in the same process reaches it. */
    private static String inferenceBase() {
        Connector connector = ConfigManager.getInstance().getListener(ConnectorType.INFERENCE_CONNECTOR);
        SocketAddress address = connector.getSocketAddress();
        if (!(address instanceof InetSocketAddress)) {
            throw new IllegalStateException("the inference API listens on " + address + ", not a TCP port");
        }
        InetSocketAddress inet = (InetSocketAddress) address;
        InetAddress host = inet.getAddress();
        String name = host == null || host.isAnyLocalAddress() ? "127.0.0.1" : host.getHostAddress();
        if (name.contains(":")) {
            name = "[" + name + "]";
        }
        return (connector.isSsl() ? "https://" : "http://") + name + ":" + inet.getPort();
    }

    private static FullHttpRequest nettyRequest(Request request) throws IOException {
        try {
            Field field = ModelServerRequest.class.getDeclaredField("req");
            field.setAccessible(true);
            return (FullHttpRequest) field.get(request);
        } catch (ReflectiveOperationException | ClassCastException exc) {
            throw new IOException("cannot read the request headers from TorchServe's plugin request", exc);
        }
    }

    private static String encode(String segment) {
        return URLEncoder.encode(segment, StandardCharsets.UTF_8).replace("+", "%20");
    }
}
