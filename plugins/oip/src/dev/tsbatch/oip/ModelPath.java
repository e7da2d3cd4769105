package dev.tsbatch.oip;

import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * A model route: /v2/models/{name}[/versions/{version}][/{action}] (action "" for
 * metadata), or KServe v1's /v1/models/{name}[:predict|:explain] (action "" for its
 * status, "infer" for predict).
 */
final class ModelPath {
    final String name;
    final String version;
    final String action;

    private ModelPath(String name, String version, String action) {
        this.name = name;
        this.version = version;
        this.action = action;
    }

    /** The model route of the segments after /v2, or null when they are not one. */
    static ModelPath parse(List<String> path) {
        if (path.size() < 2 || !path.get(0).equals("models")) {
            return null;
        }
        String name = decode(path.get(1));
        List<String> rest = path.subList(2, path.size());
        String version = null;
        if (rest.size() >= 2 && rest.get(0).equals("versions")) {
            version = decode(rest.get(1));
            rest = rest.subList(2, rest.size());
        }
        if (rest.size() > 1) {
            return null;
        }
        return new ModelPath(name, version, rest.isEmpty() ? "" : rest.get(0));
    }

    /** The KServe v1 model route of the segments after /v1, or null when they are not one. */
    static ModelPath parseV1(List<String> path) {
        if (path.size() != 2 || !path.get(0).equals("models")) {
            return null;
        }
        String last = path.get(1);
        int colon = last.lastIndexOf(':');
        if (colon < 0) {
            return new ModelPath(decode(last), null, "");
        }
        String name = decode(last.substring(0, colon));
        switch (last.substring(colon + 1)) {
            case "predict":
                return new ModelPath(name, null, "infer");
            case "explain":
                return new ModelPath(name, null, "explain");
            default:
                return null;
        }
    }

    private static String decode(String segment) {
        return URLDecoder.decode(segment, StandardCharsets.UTF_8);
    }
}
