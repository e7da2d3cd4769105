package dev.tsbatch.oip;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.pytorch.serve.servingsdk.Context;
import org.pytorch.serve.servingsdk.ModelServerEndpoint;
import org.pytorch.serve.servingsdk.annotations.Endpoint;
import org.pytorch.serve.servingsdk.annotations.helpers.EndpointTypes;
import org.pytorch.serve.servingsdk.http.Request;
import org.pytorch.serve.servingsdk.http.Response;
import org.pytorch.serve.util.ConfigManager;
import org.pytorch.serve.wlm.Model;
import org.pytorch.serve.wlm.ModelManager;
import org.pytorch.serve.wlm.ModelVersionName;
import org.pytorch.serve.wlm.ModelVersionedRefs;
import org.pytorch.serve.wlm.WorkerState;
import org.pytorch.serve.wlm.WorkerThread;

/**
 * The Open Inference Protocol's (KServe v2) health, readiness and metadata routes, which
 * TorchServe 0.12 does not serve: GET /v2, /v2/health/live, /v2/health/ready,
 * /v2/models/{m}[/versions/{v}][/ready], and Triton's model configuration,
 * /v2/models/{m}[/versions/{v}]/config ({@link TritonModelConfig}).
 *
 * <p>TorchServe hands a plugin every path whose first segment is its urlPattern, so this
 * endpoint also receives /v2/models/{m}/infer, which the frontend would otherwise route to
 * its KServe v2 handler; {@link InferForwarder} passes those on to /predictions/{m}.
 *
 * <p>Readiness is what deploy/probe.py checks: every model has at least minWorkers (at
 * least one) workers with their model loaded, and the pod is not draining (the file named
 * by TSBATCH_DRAIN_FILE, default ./draining, does not exist). Not ready is 503.
 */
@Endpoint(
        urlPattern = "v2",
        endpointType = EndpointTypes.INFERENCE,
        description = "Open Inference Protocol health, readiness and model metadata")
public class OpenInferenceEndpoint extends ModelServerEndpoint {

    /** Written into each archive by the toolkit's packaging (tsbatch/archive/package.py). */
    static final String METADATA_FILE = "oip_metadata.json";

    private final InferForwarder forwarder = new InferForwarder();

    public OpenInferenceEndpoint() {
        BodyRetainer.installWhenReady();
    }

    @Override
    public void doGet(Request request, Response response, Context context) throws IOException {
        List<String> path = segments(request.getRequestURI());
        if (path.isEmpty()) {
            send(response, 200, serverMetadata());
        } else if (path.equals(List.of("health", "live"))) {
            JsonObject live = new JsonObject();
            live.addProperty("live", true);
            send(response, 200, live);
        } else if (path.equals(List.of("health", "ready"))) {
            serverReady(response);
        } else if (path.size() >= 2 && path.get(0).equals("models")) {
            modelRoute(path, response);
        } else {
            send(response, 404, error("no such Open Inference Protocol route: GET " + request.getRequestURI()));
        }
    }

    @Override
    public void doPost(Request request, Response response, Context context) throws IOException {
        List<String> path = segments(request.getRequestURI());
        ModelPath model = ModelPath.parse(path);
        if (model == null || !(model.action.equals("infer") || model.action.equals("explain"))) {
            send(response, 404, error("no such Open Inference Protocol route: POST " + request.getRequestURI()));
            return;
        }
        forwarder.forward(request, response, model);
    }

    private static void modelRoute(List<String> path, Response response) throws IOException {
        ModelPath route = ModelPath.parse(path);
        if (route == null || !(route.action.isEmpty() || route.action.equals("ready") || route.action.equals("config"))) {
            send(response, 404, error("no such Open Inference Protocol route: /v2/" + String.join("/", path)));
            return;
        }
        Model model = find(route.name, route.version);
        if (model == null) {
            send(response, 404, error(notServed(route)));
        } else if (route.action.isEmpty()) {
            send(response, 200, modelMetadata(model));
        } else if (route.action.equals("config")) {
            send(response, 200, TritonModelConfig.of(model, modelMetadata(model)));
        } else {
            sendModelReady(response, model);
        }
    }

    /**
     * A model's readiness as both protocols answer it: 200 {"name", "ready": true}, or 503
     * with "ready": false and "error" saying why.
     */
    static void sendModelReady(Response response, Model model) throws IOException {
        String why = notReadyReason(model);
        JsonObject ready = new JsonObject();
        ready.addProperty("name", model.getModelName());
        ready.addProperty("ready", why == null);
        if (why != null) {
            ready.addProperty("error", why);
        }
        send(response, why == null ? 200 : 503, ready);
    }

    private static void serverReady(Response response) throws IOException {
        List<String> reasons = new ArrayList<>();
        Path drain = drainFile();
        if (Files.exists(drain)) {
            reasons.add("draining (" + drain + " exists): the server is being stopped");
        }
        Map<String, Model> models = ModelManager.getInstance().getDefaultModels();
        if (models.isEmpty()) {
            reasons.add("no model is registered yet");
        }
        for (Model model : new TreeMap<>(models).values()) {
            String why = notReadyReason(model);
            if (why != null) {
                reasons.add(why);
            }
        }
        JsonObject ready = new JsonObject();
        ready.addProperty("ready", reasons.isEmpty());
        if (!reasons.isEmpty()) {
            ready.addProperty("error", String.join("; ", reasons));
        }
        send(response, reasons.isEmpty() ? 200 : 503, ready);
    }

    /** Why a model cannot take requests yet, or null when it can. */
    private static String notReadyReason(Model model) {
        ModelVersionName key = new ModelVersionName(model.getModelName(), model.getVersion());
        List<WorkerThread> workers = ModelManager.getInstance().getWorkers(key);
        long loaded = workers.stream().filter(w -> w.getState() == WorkerState.WORKER_MODEL_LOADED).count();
        int needed = Math.max(1, model.getMinWorkers());
        if (loaded >= needed) {
            return null;
        }
        return model.getModelName() + ": " + loaded + "/" + needed + " workers have their model loaded";
    }

    private static JsonObject serverMetadata() {
        JsonObject metadata = new JsonObject();
        metadata.addProperty("name", "torchserve");
        metadata.addProperty("version", ConfigManager.getInstance().getVersion());
        JsonArray extensions = new JsonArray();
        extensions.add("binary_tensor_data");
        metadata.add("extensions", extensions);
        return metadata;
    }

    /** Name, versions and platform from TorchServe; inputs and outputs from the archive. */
    private static JsonObject modelMetadata(Model model) throws IOException {
        JsonObject metadata = new JsonObject();
        metadata.addProperty("name", model.getModelName());
        JsonArray versions = new JsonArray();
        ModelVersionedRefs refs = refs(model.getModelName());
        if (refs != null) {
            refs.getAllVersions().stream().map(Map.Entry::getKey).sorted().forEach(versions::add);
        }
        metadata.add("versions", versions);
        Path file = model.getModelDir().toPath().resolve(METADATA_FILE);
        JsonObject declared = Files.exists(file)
                ? JsonParser.parseString(Files.readString(file, StandardCharsets.UTF_8)).getAsJsonObject()
                : new JsonObject();
        metadata.addProperty("platform", declared.has("platform") ? declared.get("platform").getAsString() : "pytorch");
        for (String key : new String[] {"inputs", "outputs"}) {
            metadata.add(key, declared.has(key) ? declared.get(key) : new JsonArray());
        }
        return metadata;
    }

    private static ModelVersionedRefs refs(String name) {
        for (Map.Entry<String, ModelVersionedRefs> entry : ModelManager.getInstance().getAllModels()) {
            if (entry.getKey().equals(name)) {
                return entry.getValue();
            }
        }
        return null;
    }

    /** The named model's given version, or its default version when none is given. */
    static Model find(String name, String version) {
        ModelVersionedRefs refs = refs(name);
        if (refs == null) {
            return null;
        }
        return version == null ? refs.getDefaultModel() : refs.getVersionModel(version);
    }

    static String notServed(ModelPath route) {
        String what = route.version == null ? "model '" + route.name + "'" : "model '" + route.name + "' version " + route.version;
        return what + " is not served; models: " + new TreeMap<>(ModelManager.getInstance().getDefaultModels()).keySet();
    }

    private static Path drainFile() {
        String configured = System.getenv("TSBATCH_DRAIN_FILE");
        return configured != null && !configured.isEmpty() ? Paths.get(configured) : Paths.get("draining").toAbsolutePath();
    }

    /** The path after /v2, split on "/", query string dropped. */
    static List<String> segments(String uri) {
        String path = uri.split("\\?", 2)[0];
        List<String> parts = new ArrayList<>();
        for (String part : path.split("/")) {
            if (!part.isEmpty()) {
                parts.add(part);
            }
        }
        return parts.isEmpty() ? parts : parts.subList(1, parts.size());
    }

    static JsonObject error(String message) {
        JsonObject body = new JsonObject();
        body.addProperty("error", message);
        return body;
    }

    static void send(Response response, int status, JsonElement body) throws IOException {
        response.setStatus(status);
        response.setContentType("application/json");
        try (OutputStream out = response.getOutputStream()) {
            out.write(body.toString().getBytes(StandardCharsets.UTF_8));
        }
    }
}
