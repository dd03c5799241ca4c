package tessera.ij;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The options of one native operation: names as the {@code tessera} command-line program
 * spells them, values as strings, starting from the native core's defaults
 * ({@link Native#defaults}). A plugin keeps one per operation for the session (so the last
 * values are remembered), sets what its dialog read, and hands {@link #toString()} to the
 * native call, which parses and validates it once; nothing here checks a value, so there is
 * one parser, on the native side.
 */
final class Options {
    private final Map<String, String> values;

    private Options(Map<String, String> values) {
        this.values = values;
    }

    /** Operation {@code op}'s options at the native defaults. */
    static Options defaults(String op) {
        return new Options(new LinkedHashMap<>(Native.defaults(op)));
    }

    /** A copy, to set one call's values (the backend, say) without remembering them. */
    Options copy() {
        return new Options(new LinkedHashMap<>(values));
    }

    /** Sets {@code key} to {@code value}'s string (an int as a whole number, a boolean as
     *  true / false). */
    Options set(String key, Object value) {
        values.put(key, String.valueOf(value));
        return this;
    }

    String get(String key) {
        String v = values.get(key);
        if (v == null) throw new IllegalStateException("no option \"" + key + "\" among " + values.keySet());
        return v;
    }

    int integer(String key) {
        return Integer.parseInt(get(key));
    }

    double number(String key) {
        return Double.parseDouble(get(key));
    }

    boolean flag(String key) {
        return Boolean.parseBoolean(get(key));
    }

    /** {@code key=value ...}, a value with spaces in brackets, as ImageJ records it. */
    @Override
    public String toString() {
        StringBuilder s = new StringBuilder();
        for (Map.Entry<String, String> e : values.entrySet()) {
            if (s.length() > 0) s.append(' ');
            String v = e.getValue();
            s.append(e.getKey()).append('=').append(v.matches(".*\\s.*") ? "[" + v + "]" : v);
        }
        return s.toString();
    }
}
