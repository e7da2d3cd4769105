package dev.tsbatch.oip;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import org.pytorch.serve.wlm.Model;

/**
 * GET /v2/models/{m}[/versions/{v}]/config: the model's configuration in the JSON shape of
 * Triton's model-configuration extension, which perf_analyzer (its default mode) and Model
 * Analyzer read before they send anything.
 *
 * <p>Built from what the server knows, for any model: the batch settings TorchServe runs
 * now (so a live change by the management API shows at once) and the inputs and outputs
 * of the model's metadata (GET /v2/models/{m}). TorchServe batches requests, and a request
 * of this protocol carries a batch of inputs in its first dimension, so:
 *
 * <ul>
 *   <li>max_batch_size is batchSize (at least 1): with perf_analyzer's default -b 1, each
 *       request is one input and a batch of batchSize requests is a batch of batchSize
 *       inputs, as on Triton;
 *   <li>each tensor's dims are its metadata shape after that batch dimension (the
 *       toolkit's archives declare their input [-1, 1]: dims [1]);
 *   <li>dynamic_batching's max_queue_delay_microseconds is maxBatchDelay, and its one
 *       preferred size batchSize (TorchServe runs a batch as soon as it is full);
 *   <li>TorchServe's own settings are under parameters, as strings (Triton's form).
 * </ul>
 */
final class TritonModelConfig {

    private TritonModelConfig() {}

    static JsonObject of(Model model, JsonObject metadata) {
        int batchSize = Math.max(1, model.getBatchSize());
        JsonObject config = new JsonObject();
        config.addProperty("name", model.getModelName());
        config.addProperty("platform", metadata.get("platform").getAsString());
        config.addProperty("backend", "torchserve");
        config.addProperty("max_batch_size", batchSize);
        config.add("input", tensors(metadata.getAsJsonArray("inputs")));
        config.add("output", tensors(metadata.getAsJsonArray("outputs")));
        JsonObject batching = new JsonObject();
        JsonArray preferred = new JsonArray();
        preferred.add(batchSize);
        batching.add("preferred_batch_size", preferred);
        batching.addProperty("max_queue_delay_microseconds", 1000L * model.getMaxBatchDelay());
        config.add("dynamic_batching", batching);
        JsonObject parameters = new JsonObject();
        parameter(parameters, "torchserve.batchSize", model.getBatchSize());
        parameter(parameters, "torchserve.maxBatchDelay", model.getMaxBatchDelay());
        parameter(parameters, "torchserve.minWorkers", model.getMinWorkers());
        parameter(parameters, "torchserve.maxWorkers", model.getMaxWorkers());
        parameter(parameters, "torchserve.responseTimeout", model.getResponseTimeout());
        config.add("parameters", parameters);
        return config;
    }

    /** Metadata tensors ({name, datatype, shape}) as Triton's config tensors. */
    private static JsonArray tensors(JsonArray declared) {
        JsonArray tensors = new JsonArray();
        for (JsonElement element : declared) {
            JsonObject tensor = element.getAsJsonObject();
            JsonObject out = new JsonObject();
            out.addProperty("name", tensor.get("name").getAsString());
            out.addProperty("data_type", dataType(tensor.get("datatype").getAsString()));
            JsonArray shape = tensor.has("shape") ? tensor.getAsJsonArray("shape") : new JsonArray();
            JsonArray dims = new JsonArray();
            for (int i = 1; i < shape.size(); i++) { // after the batch dimension
                dims.add(shape.get(i).getAsLong());
            }
            out.add("dims", dims);
            tensors.add(out);
        }
        return tensors;
    }

    /** The protocol's tensor datatype as Triton's config names it: BYTES is TYPE_STRING. */
    static String dataType(String datatype) {
        return "TYPE_" + (datatype.equals("BYTES") ? "STRING" : datatype);
    }

    private static void parameter(JsonObject parameters, String key, int value) {
        JsonObject entry = new JsonObject();
        entry.addProperty("string_value", Integer.toString(value));
        parameters.add(key, entry);
    }
}
