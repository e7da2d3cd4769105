package dev.tsbatch.oip;

import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.List;

/** A /v2/models/{name}[/versions/{version}][/{action}] path; action is "" for metadata. */
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

    private static String decode(String segment) {
        return URLDecoder.decode(segment, StandardCharsets.UTF_8);
    }
}
