package dev.tsbatch.oip;

import static dev.tsbatch.oip.OpenInferenceEndpoint.error;
import static dev.tsbatch.oip.OpenInferenceEndpoint.find;
import static dev.tsbatch.oip.OpenInferenceEndpoint.notServed;
import static dev.tsbatch.oip.OpenInferenceEndpoint.segments;
import static dev.tsbatch.oip.OpenInferenceEndpoint.send;
import static dev.tsbatch.oip.OpenInferenceEndpoint.sendModelReady;

import com.google.gson.JsonObject;
import java.io.IOException;
import java.util.List;
import org.pytorch.serve.servingsdk.Context;
import org.pytorch.serve.servingsdk.ModelServerEndpoint;
import org.pytorch.serve.servingsdk.annotations.Endpoint;
import org.pytorch.serve.servingsdk.annotations.helpers.EndpointTypes;
import org.pytorch.serve.servingsdk.http.Request;
import org.pytorch.serve.servingsdk.http.Response;
import org.pytorch.serve.wlm.Model;

/**
 * KServe v1's model status, GET /v1/models/{m}, which TorchServe 0.12 serves on its
 * management port only, where the KServe SDK's is_model_ready does not look.
 *
 * <p>Owning /v1 means owning POST /v1/models/{m}:predict (and :explain) too, which the
 * frontend would otherwise pass to the handler itself; {@link InferForwarder} passes them on
 * to /predictions/{m} (and /explanations/{m}) unchanged, and the handler reads the
 * {"instances": [...]} body as before. GET /v1 answers the liveness body KServe's servers
 * give at their root ({"status": "alive"}): TorchServe keeps GET / for itself (405), so a v1
 * client checks liveness with /v1 as its base URL.
 */
@Endpoint(
        urlPattern = "v1",
        endpointType = EndpointTypes.INFERENCE,
        description = "KServe v1 model status; predict and explain passed on to TorchServe")
public class KServeV1Endpoint extends ModelServerEndpoint {

    private final InferForwarder forwarder = new InferForwarder();

    public KServeV1Endpoint() {
        BodyRetainer.installWhenReady();
    }

    @Override
    public void doGet(Request request, Response response, Context context) throws IOException {
        List<String> path = segments(request.getRequestURI());
        if (path.isEmpty()) {
            JsonObject live = new JsonObject();
            live.addProperty("status", "alive");
            send(response, 200, live);
            return;
        }
        ModelPath route = ModelPath.parseV1(path);
        if (route == null || !route.action.isEmpty()) {
            notFound(response, "GET", request);
            return;
        }
        Model model = find(route.name, null);
        if (model == null) {
            send(response, 404, error(notServed(route)));
        } else {
            sendModelReady(response, model);
        }
    }

    @Override
    public void doPost(Request request, Response response, Context context) throws IOException {
        ModelPath route = ModelPath.parseV1(segments(request.getRequestURI()));
        if (route == null || route.action.isEmpty()) {
            notFound(response, "POST", request);
            return;
        }
        forwarder.forward(request, response, route);
    }

    private static void notFound(Response response, String method, Request request) throws IOException {
        String message = "no such KServe v1 route: " + method + " " + request.getRequestURI();
        send(response, 404, error(message));
    }
}
