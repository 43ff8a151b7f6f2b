-- An e-commerce store: composite keys, a category tree (self-reference), ON DELETE
-- CASCADE and SET NULL, CHECKs, a generated column, multi-column unique keys,
-- fulltext, unsigned keys, and a stored procedure to skip.
CREATE DATABASE shop;
USE shop;

CREATE TABLE category (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT,
  parent_id INT UNSIGNED NULL,
  slug VARCHAR(80) NOT NULL,
  name VARCHAR(120) NOT NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uq_category_slug (slug),
  CONSTRAINT fk_category_parent FOREIGN KEY (parent_id) REFERENCES category (id) ON DELETE SET NULL
) ENGINE=InnoDB AUTO_INCREMENT=100;

CREATE TABLE product (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  sku CHAR(12) NOT NULL,
  category_id INT UNSIGNED NULL,
  title VARCHAR(200) NOT NULL,
  description MEDIUMTEXT,
  price DECIMAL(10,2) NOT NULL,
  vat_rate DECIMAL(4,3) NOT NULL DEFAULT 0.200,
  price_gross DECIMAL(12,2) AS (price * (1 + vat_rate)) STORED,
  weight_g INT UNSIGNED NULL,
  active TINYINT(1) NOT NULL DEFAULT 1,
  created_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uq_product_sku (sku),
  KEY ix_product_category (category_id),
  FULLTEXT KEY ft_product_title (title, description),
  CONSTRAINT fk_product_category FOREIGN KEY (category_id) REFERENCES category (id) ON DELETE SET NULL,
  CONSTRAINT ck_product_price CHECK (price >= 0),
  CONSTRAINT ck_product_vat CHECK (vat_rate BETWEEN 0 AND 0.5)
) ENGINE=InnoDB;

CREATE TABLE customer (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  email VARCHAR(190) NOT NULL,
  display_name VARCHAR(100) NULL,
  country CHAR(2) NOT NULL DEFAULT 'FR',
  UNIQUE KEY uq_customer_email (email),
  CONSTRAINT ck_customer_country CHECK (country = UPPER(country))
) ENGINE=InnoDB;

CREATE TABLE cart (
  customer_id BIGINT UNSIGNED NOT NULL,
  product_id BIGINT UNSIGNED NOT NULL,
  quantity SMALLINT UNSIGNED NOT NULL DEFAULT 1,
  added_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (customer_id, product_id),
  CONSTRAINT fk_cart_customer FOREIGN KEY (customer_id) REFERENCES customer (id) ON DELETE CASCADE,
  CONSTRAINT fk_cart_product FOREIGN KEY (product_id) REFERENCES product (id) ON DELETE CASCADE,
  CONSTRAINT ck_cart_quantity CHECK (quantity > 0 AND quantity <= 99)
) ENGINE=InnoDB;

CREATE TABLE purchase (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  customer_id BIGINT UNSIGNED NOT NULL,
  status ENUM('new','paid','shipped','cancelled') NOT NULL DEFAULT 'new',
  total DECIMAL(12,2) NOT NULL DEFAULT 0,
  placed_at DATETIME NOT NULL,
  PRIMARY KEY (id),
  KEY ix_purchase_customer (customer_id, placed_at),
  CONSTRAINT fk_purchase_customer FOREIGN KEY (customer_id) REFERENCES customer (id)
) ENGINE=InnoDB;

CREATE TABLE purchase_line (
  purchase_id BIGINT UNSIGNED NOT NULL,
  line_no SMALLINT UNSIGNED NOT NULL,
  product_id BIGINT UNSIGNED NOT NULL,
  quantity SMALLINT UNSIGNED NOT NULL,
  unit_price DECIMAL(10,2) NOT NULL,
  PRIMARY KEY (purchase_id, line_no),
  UNIQUE KEY uq_line_product (purchase_id, product_id),
  CONSTRAINT fk_line_purchase FOREIGN KEY (purchase_id) REFERENCES purchase (id) ON DELETE CASCADE,
  CONSTRAINT fk_line_product FOREIGN KEY (product_id) REFERENCES product (id),
  CONSTRAINT ck_line_quantity CHECK (quantity > 0)
) ENGINE=InnoDB;

CREATE TABLE shipment (
  id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  purchase_id BIGINT UNSIGNED NOT NULL,
  line_no SMALLINT UNSIGNED NOT NULL,
  carrier VARCHAR(40) NOT NULL,
  tracking VARCHAR(64) NULL,
  shipped_on DATE NULL,
  CONSTRAINT fk_shipment_line FOREIGN KEY (purchase_id, line_no) REFERENCES purchase_line (purchase_id, line_no) ON DELETE CASCADE,
  CONSTRAINT ck_shipment_tracking CHECK (tracking IS NULL OR CHAR_LENGTH(tracking) >= 6)
) ENGINE=InnoDB;

DELIMITER //
CREATE PROCEDURE close_old_carts()
BEGIN
  DELETE FROM cart WHERE added_at < NOW() - INTERVAL 30 DAY;
END //
DELIMITER ;
