// Prints the iteration order of Java's HashMap (keys put one by one) and of
// new HashSet<>(collection), for each set of keys read from stdin (one key a
// line, sets ended by an "<end>" line): what coordkit.engine.groups.modern.java_order
// reproduces.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;

public class HashOrder {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<String> keys = new ArrayList<>();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (!line.equals("<end>")) {
                keys.add(line);
                continue;
            }
            Map<String, Integer> map = new HashMap<>();
            for (String key : keys) {
                map.put(key, 0);
            }
            System.out.println("map");
            for (String key : map.keySet()) {
                System.out.println(key);
            }
            System.out.println("set");
            for (String key : new HashSet<>(keys)) {
                System.out.println(key);
            }
            System.out.println("<end>");
            keys.clear();
        }
    }
}
